#!/usr/bin/env bash
# make demo: a local cluster, the operator, and the sample Pipelines until they run. As root, on
# real nodes (hack/demo-realnodes.sh); otherwise on simulated nodes, with the operator as a local
# process and the seed Pipeline. Ctrl-C (or `make demo-down` later) stops everything it started.
set -euo pipefail
: "${KUBECTL:?}" "${LOCAL_DIR:?}" "${MAKE:=make}"
export KUBECONFIG="$LOCAL_DIR/kubeconfig"
sample=config/samples/distri-infer_v1beta1_pipeline.yaml
name=facedetection-pipeline
timeout=${DEMO_TIMEOUT:-180}

say() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
cleanup() { say "stopping the demo"; "$MAKE" -s local-down; }
trap 'cleanup; exit 130' INT TERM

if [ -n "${REAL_NODES:-}" ] && [ "$(id -u)" = 0 ]; then
	exec hack/demo-realnodes.sh
fi
if [ -n "${REAL_NODES:-}" ]; then
	echo "real nodes need root (a network namespace, cgroups, containers): this demo runs on simulated nodes, with the operator as a local process"
fi

say "starting the local control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok nodes)"
"$MAKE" -s local-up REAL_NODES=

say "installing the CRDs (Pipeline, ModelStorageClass)"
"$MAKE" -s install

say "starting the operator in the background (log: $LOCAL_DIR/logs/operator.log)"
pidfile="$LOCAL_DIR/pids/operator.pid"
if [ -f "$pidfile" ] && kill -0 "$(cat "$pidfile")" 2>/dev/null; then
	echo "operator already running (pid $(cat "$pidfile"))"
else
	setsid bin/manager --enable-webhooks=false --local-conversion --health-probe-bind-address=127.0.0.1:0 >"$LOCAL_DIR/logs/operator.log" 2>&1 < /dev/null &
	echo $! >"$pidfile"
	echo "operator pid $(cat "$pidfile")"
fi

say "waiting for the operator to serve the Pipeline CRD's conversion webhook on loopback"
crd=pipelines.distri-infer.ndsl.cn
for ((i = 0; ; i++)); do
	url=$("$KUBECTL" get crd "$crd" -o jsonpath='{.spec.conversion.webhook.clientConfig.url}' 2>/dev/null || true)
	case "$url" in https://127.0.0.1:*) echo "$url"; break ;; esac
	if ((i >= 60)) || ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		echo "the operator did not point the CRD's conversion webhook at itself; last lines of its log:" >&2
		tail -20 "$LOCAL_DIR/logs/operator.log" >&2
		exit 1
	fi
	sleep 1
done

say "applying the sample Pipeline ($sample)"
"$KUBECTL" apply -f "$sample"

say "waiting for $name to be Running (up to ${timeout}s; kubectl reads v1)"
last=""
for ((i = 0; i < timeout; i++)); do
	if ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then
		echo "the operator stopped; last lines of its log:" >&2
		tail -20 "$LOCAL_DIR/logs/operator.log" >&2
		exit 1
	fi
	line=$("$KUBECTL" get pipeline "$name" -o jsonpath='{.status.phase} {.status.readySteps}/{.status.totalSteps} {.status.conditions[?(@.type=="Available")].message}' 2>/dev/null || true)
	line=$(echo "$line" | xargs)
	if [ "$line" != "$last" ]; then
		printf '%3ds  %s\n' "$i" "${line:-(no status yet)}"
		last=$line
	fi
	case "$line" in
	Running*) break ;;
	Failed*)
		echo "the Pipeline failed:" >&2
		"$KUBECTL" get pipeline "$name" -o jsonpath='{.status.conditions[?(@.type=="Degraded")].message}{"\n"}' >&2
		exit 1
		;;
	esac
	sleep 1
done
case "$last" in Running*) ;; *)
	echo "the Pipeline did not reach running in ${timeout}s; see $LOCAL_DIR/logs/operator.log" >&2
	exit 1
	;;
esac

say "the Pipeline and its children"
"$KUBECTL" get pipeline "$name"
echo
"$KUBECTL" get deployments,pods,services -l pipeline="$name" -o wide
echo
"$KUBECTL" get persistentvolumes,persistentvolumeclaims -l pipeline="$name"
cat <<TXT

The demo keeps running. Try:
  export KUBECONFIG=$KUBECONFIG
  export PATH=$(dirname "$KUBECTL"):\$PATH   # the kubectl make demo built
  kubectl describe pipeline $name
  kubectl edit pipeline $name        # change an image or add a step and watch it converge
Stop everything with: make demo-down
TXT
