#!/usr/bin/env bash
# debian-base.sh ROOTFS — writes into ROOTFS the files of the manager image's base, made from
# Debian's packages as distroless/static (the Dockerfile's base) is: of ca-certificates, the
# bundle of trusted CAs that its update-ca-certificates would make (/etc/ssl/certs/
# ca-certificates.crt); of netbase, /etc/services, /etc/protocols, /etc/rpc and /etc/ethertypes;
# each package's copyright, and its record in /var/lib/dpkg/status.d/ (what image scanners read
# to know the packages and their versions). Scripts, manuals and examples are left out: nothing
# in the image runs them.
#
# The packages are Architecture: all, so one base serves every platform. They are fetched with
# `apt-get download` into CACHE_DIR/debian-packages once, and reused while there.
set -euo pipefail
rootfs=$1
packages=(ca-certificates netbase)
cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/pipeline-operator}/debian-packages"
mkdir -p "$cache"
missing=()
for p in "${packages[@]}"; do
	compgen -G "$cache/${p}_*_all.deb" >/dev/null || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo ">> fetching ${missing[*]} (Debian packages) for the image's base"
	(cd "$cache" && { apt-get download -q "${missing[@]}" >/dev/null 2>&1 ||
		{ apt-get update -q >/dev/null && apt-get download -q "${missing[@]}" >/dev/null; }; })
fi

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$rootfs/etc/ssl/certs" "$rootfs/var/lib/dpkg/status.d"
for p in "${packages[@]}"; do
	debs=("$cache/${p}"_*_all.deb)
	deb=${debs[-1]}
	dpkg-deb -x "$deb" "$work/$p"
	dpkg-deb -f "$deb" >"$rootfs/var/lib/dpkg/status.d/$p"
	install -D -m 0644 "$work/$p/usr/share/doc/$p/copyright" "$rootfs/usr/share/doc/$p/copyright"
done
# update-ca-certificates with the package's defaults: every certificate it ships, in order of
# name, one after the other.
find "$work/ca-certificates/usr/share/ca-certificates" -name '*.crt' | LC_ALL=C sort |
	xargs cat >"$rootfs/etc/ssl/certs/ca-certificates.crt"
[ -s "$rootfs/etc/ssl/certs/ca-certificates.crt" ] || {
	echo "debian-base: ca-certificates shipped no certificate" >&2
	exit 1
}
for f in services protocols rpc ethertypes; do
	install -m 0644 "$work/netbase/etc/$f" "$rootfs/etc/$f"
done
