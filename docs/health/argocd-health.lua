-- Argo CD health check of distri-infer.ndsl.cn Pipelines (resource.customizations.health in
-- argocd-cm, key distri-infer.ndsl.cn_Pipeline). It reads the conditions every version of the
-- Pipeline API reports: Stalled (a person is needed), Ready (phase Running), Reconciling.
hs = { status = "Progressing", message = "Waiting for the operator" }
if obj.metadata ~= nil and obj.metadata.deletionTimestamp ~= nil then
  hs.message = "Deleting"
  return hs
end
if obj.status == nil then
  return hs
end
if obj.status.observedGeneration == nil or obj.metadata.generation == nil
    or obj.status.observedGeneration < obj.metadata.generation then
  hs.message = "The operator has not acted on the latest spec yet"
  return hs
end
local conditions = {}
if obj.status.conditions ~= nil then
  for _, c in ipairs(obj.status.conditions) do
    conditions[c.type] = c
  end
end
local stalled, ready, reconciling = conditions["Stalled"], conditions["Ready"], conditions["Reconciling"]
if stalled ~= nil and stalled.status == "True" then
  hs.status = "Degraded"
  hs.message = stalled.message
elseif ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = ready.message
elseif reconciling ~= nil and reconciling.status == "True" then
  hs.message = reconciling.message
elseif ready ~= nil then
  hs.message = ready.message
end
return hs
