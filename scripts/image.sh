#!/usr/bin/env bash
# Builds the container image from docker/Dockerfile with podman -- no Docker daemon or registry
# needed (../shared/docs/containers.md explains the recipe). The Dockerfile itself stays plain:
# `docker build -f docker/Dockerfile .` works the same elsewhere.
#
#   scripts/image.sh [--tag NAME]      default tag localhost/pagoda:latest
#
# When the Dockerfile's base image (debian:bookworm-slim) is not in podman's store, it is
# bootstrapped from this machine's apt source with debootstrap and imported under that name.
# The build context is the checkout's tracked and untracked-but-not-ignored files (podman 4.3
# does not read Dockerfile.dockerignore). Prints the image size and what the image adds to
# its base image.
set -euo pipefail
cd "$(dirname "$0")/.."

TAG=localhost/pagoda:latest
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) TAG="$2"; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
BASE=docker.io/library/debian:bookworm-slim
for tool in podman runc debootstrap; do
  command -v "$tool" >/dev/null || PATH="$PATH:/usr/sbin:/sbin"
  command -v "$tool" >/dev/null || { echo "image.sh: $tool missing (scripts/install-deps.sh)" >&2; exit 1; }
done

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if ! podman image exists "$BASE"; then
  mirror=$(sed -n 's/^URIs: //p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n1)
  mirror=${mirror:-http://deb.debian.org/debian}
  echo "image.sh: bootstrapping $BASE from $mirror (debootstrap, about 2 minutes)"
  debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  tar -C "$work/rootfs" -c . | podman import - "$BASE" >/dev/null
  rm -rf "$work/rootfs"
fi

mkdir -p "$work/ctx"
git ls-files -z --cached --others --exclude-standard \
  | (while IFS= read -r -d '' f; do [ -e "$f" ] && printf '%s\0' "$f"; done) \
  | tar --null -T - -cf - | tar -x -C "$work/ctx"
echo "image.sh: podman build -> $TAG"
podman build --pull=never --isolation=chroot --network=host -f docker/Dockerfile -t "$TAG" \
  "$work/ctx"

size=$(podman image inspect --format '{{.Size}}' "$TAG")
base=$(podman image inspect --format '{{.Size}}' "$BASE")
echo "image.sh: $TAG is $((size / 1000000)) MB; $((  (size - base) / 1000000 )) MB on top of $BASE ($((base / 1000000)) MB)"
