# Stop Kueue (kueue/start.sh). Sourced by down.sh while the API server still runs: its webhook
# configurations go first, so that nothing waits on a webhook server that is gone (they fail
# closed: a Workload could not be created or changed while they point at nothing).
# shellcheck shell=bash
if [[ -f "$D/pids/kueue.pid" ]]; then
	bin_dir=$(sed -n 's/^BIN_DIR=//p' "$D/cluster.env" 2>/dev/null) || bin_dir=
	if [[ -x "$bin_dir/kubectl" && -f "$D/kubeconfig" ]]; then
		"$bin_dir/kubectl" --kubeconfig "$D/kubeconfig" --request-timeout=10s delete --ignore-not-found \
			mutatingwebhookconfiguration/kueue-mutating-webhook-configuration \
			validatingwebhookconfiguration/kueue-validating-webhook-configuration >/dev/null 2>&1 ||
			cluster_log "could not delete Kueue's webhook configurations (the API server is down?)"
	fi
	stop kueue
fi
rm -rf "$D/kueue"
