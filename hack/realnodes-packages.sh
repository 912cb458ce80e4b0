#!/usr/bin/env bash
# realnodes-packages.sh — installs, from Debian's packages, what the local cluster's real nodes
# run beside the binaries built from the Go module proxy: runc (with libseccomp), nftables for
# kube-proxy, iproute2 and util-linux (nsenter) for the network namespace. Root only.
set -euo pipefail
missing=()
for cmd in runc:runc nft:nftables ip:iproute2 nsenter:util-linux conntrack:conntrack; do
	command -v "${cmd%%:*}" >/dev/null || missing+=("${cmd#*:}")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo ">> installing ${missing[*]} (Debian packages) for the real nodes"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null ||
	{ apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends "${missing[@]}" >/dev/null; }
