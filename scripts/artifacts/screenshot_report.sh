#!/usr/bin/env bash
# Screenshot a docaudit report page in headless Chromium (Debian package `chromium`), to check it by eye:
#   scripts/artifacts/screenshot_report.sh OUT/report.html page.png [WIDTHxHEIGHT]
# Nothing is fetched from the network (the page is self-contained); the browser profile is a temporary folder.
set -euo pipefail
page="$(cd "$(dirname "$1")" && pwd)/$(basename "$1")"
png="$2"
size="${3:-1280,2000}"
browser="$(command -v chromium || command -v chromium-browser || true)"
[ -n "$browser" ] || { echo "error: chromium not found (apt-get install -y chromium)" >&2; exit 2; }
profile="$(mktemp -d)"
trap 'rm -rf "$profile"' EXIT
"$browser" --headless --no-sandbox --disable-gpu --disable-background-networking --disable-component-update \
    --no-first-run --hide-scrollbars --user-data-dir="$profile" --window-size="$size" \
    --screenshot="$(cd "$(dirname "$png")" && pwd)/$(basename "$png")" "file://$page" 2>/dev/null
echo "wrote $png"
