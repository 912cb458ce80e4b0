#!/usr/bin/env bash
# make demo on real nodes: a local cluster whose nodes run real containers, the operator
# installed from the release manifest with its image made here, the seed Pipeline on simulated
# nodes beside, and the iris Pipeline of examples/iris on two real nodes, answering a request
# through its router. Ctrl-C (or `make demo-down` later) stops everything it started.
set -euo pipefail
: "${KUBECTL:?}" "${LOCAL_DIR:?}" "${INSTALLER:?}" "${MODELSERVER_IMG:?}" "${MAKE:=make}"
export KUBECONFIG="$LOCAL_DIR/kubeconfig"
timeout=${DEMO_TIMEOUT:-240}
seed=config/samples/distri-infer_v1beta1_pipeline.yaml

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
took() { printf '   (%ds)\n' $((SECONDS - $1)); }
cleanup() { say "stopping the demo"; "$MAKE" -s local-down; }
trap 'cleanup; exit 130' INT TERM

# wait_for DESCRIPTION COMMAND...: runs COMMAND every second until it succeeds, printing what it
# prints when that changes.
wait_for() {
	local what=$1 last="" line i
	shift
	for ((i = 0; i < timeout; i++)); do
		if line=$("$@" 2>&1); then
			printf '%4ds  %s\n' "$i" "$line"
			return 0
		fi
		if [ "$line" != "$last" ]; then printf '%4ds  %s\n' "$i" "$line"; last=$line; fi
		sleep 1
	done
	echo "$what: not within ${timeout}s" >&2
	return 1
}

start=$SECONDS
say "starting the local cluster: control plane, real nodes ${REAL_NODES} (kubelet, containerd, runc, CNI), kube-proxy, CoreDNS, simulated nodes"
"$MAKE" -s local-up
netns=$("$MAKE" -s --no-print-directory local-netns)
took $start

start=$SECONDS
say "installing the operator from the release manifest $INSTALLER (its image made here, imported into every node)"
"$KUBECTL" apply --server-side -f "$INSTALLER" >/dev/null
"$KUBECTL" -n pipeline-operator-system wait --for=condition=Available deployment --all --timeout=${timeout}s
"$KUBECTL" -n pipeline-operator-system get pods -o wide
took $start

pipeline_state() {
	local line
	line=$("$KUBECTL" -n "$1" get pipeline "$2" -o jsonpath='{.status.phase}{range .status.steps[*]}  {.name}: {.state} {.reason}{end}')
	echo "$line"
	case "$line" in Running*) return 0 ;; Failed*) echo "the Pipeline failed" >&2; exit 1 ;; *) return 1 ;; esac
}

start=$SECONDS
say "applying the seed Pipeline ($seed, v1beta1) on simulated nodes, through the conversion webhook"
wait_for "the webhooks" "$KUBECTL" apply -f "$seed"
wait_for "the seed Pipeline Running" pipeline_state default facedetection-pipeline
took $start

start=$SECONDS
say "the iris Pipeline (examples/iris): model servers on node-a and node-b, a router, a tensor mapping"
mkdir -p "$LOCAL_DIR/models" && cp -r examples/modelserver/models/. "$LOCAL_DIR/models/"
NAMESPACE=default MODELS_DIR=$(cd "$LOCAL_DIR/models" && pwd) envsubst < examples/iris/models.yaml | "$KUBECTL" apply -f -
sed "s|localhost/modelserver:v[^ ]*|$MODELSERVER_IMG|" examples/iris/pipeline.yaml | "$KUBECTL" apply -f -
wait_for "the iris Pipeline Running" pipeline_state default iris
"$KUBECTL" get pods -l pipeline=iris -o wide
took $start

say "asking the iris Pipeline, through its router's Service, what these flowers are"
body='{"inputs":[{"name":"features","datatype":"FP32","shape":[3,4],"data":[[5.1,3.5,1.4,0.2],[6.0,2.7,4.5,1.5],[6.9,3.1,5.8,2.2]]}]}'
echo "$body"
ip=$("$KUBECTL" get service iris-router -o jsonpath='{.spec.clusterIP}')
for ((i = 0; i < 30; i++)); do
	if answer=$(nsenter --net="$netns" curl -sS --fail-with-body --max-time 10 -H 'Content-Type: application/json' \
		-w '\n   (answered in %{time_total}s)' -d "$body" "http://$ip/"); then
		break
	fi
	sleep 1
done
echo "$answer"

cat <<TXT

The demo keeps running. Try:
  export KUBECONFIG=$KUBECONFIG
  export PATH=$(dirname "$KUBECTL"):\$PATH   # the kubectl make demo built
  kubectl get pipelines -A; kubectl get pods -A -o wide
  nsenter --net=$netns curl -s -d '$body' http://$ip/   # the cluster's network, as root
Stop everything with: make demo-down
TXT
