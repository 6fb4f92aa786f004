#!/bin/sh
# Installs the Debian packages ptfil needs to build and test, or the packages named as arguments
# (bench/install-others.sh); does nothing when they are all there.
set -eu
pkgs="${*:-build-essential autoconf automake pkg-config libunwind-dev libelf-dev libcapstone-dev libdw-dev libdebuginfod-dev liblzma-dev check zlib1g-dev python3 libjemalloc2 strace groff-base man-db chromium chromium-driver clang libclang-rt-14-dev libbpf-dev python3-numpy libopenblas0-pthread libc6-dbg debuginfod elfutils libncurses-dev tmux golang-go python3-dev nodejs python3-pandas python3-matplotlib python3-ipykernel python3-jupyter-client}"
missing=""
for p in $pkgs; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
		echo "install-deps: need root to install:$missing" >&2; exit 1
	fi
else SUDO=""; fi
echo "install-deps: installing$missing"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
