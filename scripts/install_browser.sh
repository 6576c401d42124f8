#!/usr/bin/env bash
# Install Debian's Chromium for the dashboard's browser tests (Playwright drives it; no browser
# is downloaded from elsewhere). Prints its path. Needs root to install; does nothing when it is
# already there.
set -euo pipefail
if ! command -v chromium >/dev/null; then
  echo "installing chromium (Debian) for the browser tests..." >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq --no-install-recommends chromium >&2
fi
command -v chromium
