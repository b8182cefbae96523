# Local test control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler,
# kwok) built from upstream Go modules. See docs/cluster.md.
#
# Included by the top-level Makefile (`include hack/cluster/cluster.mk`), or used alone:
#   make -f hack/cluster/cluster.mk cluster-up
# Environment: T9KJOBS_CACHE (~/.cache/t9kjobs), T9KJOBS_CLUSTER_DIR ($T9KJOBS_CACHE/cluster).

# Directory of this file, whatever the current directory and however it is included.
CLUSTER_MK_DIR := $(patsubst %/,%,$(dir $(lastword $(MAKEFILE_LIST))))

.PHONY: cluster-build cluster-up cluster-down cluster-status

## cluster-build: build the control-plane binaries into the cache (once; ~8 min cold on 2 cores)
cluster-build:
	@bash $(CLUSTER_MK_DIR)/build.sh

## cluster-up: start the local cluster (builds first if needed); kubeconfig in the cluster dir
cluster-up:
	@bash $(CLUSTER_MK_DIR)/up.sh

## cluster-down: stop every cluster process and delete the cluster state
cluster-down:
	@bash $(CLUSTER_MK_DIR)/down.sh

## cluster-status: exit 0 when the local cluster is running
cluster-status:
	@bash $(CLUSTER_MK_DIR)/status.sh
