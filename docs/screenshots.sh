#!/usr/bin/env bash
# Screenshots of the documentation site, as docs/contributing.md shows them: the home page and one
# user-guide page, taken with a headless Chromium from the site served on localhost.
#
#   pip install ".[docs]"               # mkdocs, mkdocs-material, mkdocstrings, matplotlib
#   apt-get install chromium pngquant   # or any Chromium / Chrome; pngquant is optional (Pillow otherwise)
#   docs/screenshots.sh                 # writes docs/images/site-home.png and docs/images/site-guide-slkl.png
#
# Environment: CHROMIUM (the browser, default: the first of chromium, chromium-browser,
# google-chrome on PATH), PORT (default 8765), KERNELSCALE_EXAMPLE_SIZE (default small).
# Not run by CI: the committed PNGs are refreshed by hand when the site's look changes.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
OUT="$ROOT/docs/images"
PORT=${PORT:-8765}
WORK=$(mktemp -d)
SERVER=""
cleanup() {
    if [ -n "$SERVER" ]; then kill "$SERVER" 2>/dev/null || true; fi
    rm -rf "$WORK"
}
trap cleanup EXIT

CHROMIUM=${CHROMIUM:-$(command -v chromium || command -v chromium-browser || command -v google-chrome || true)}
if [ -z "$CHROMIUM" ]; then
    echo "screenshots.sh: no Chromium found; install it (apt-get install chromium) or set CHROMIUM=" >&2
    exit 1
fi

cd "$ROOT"
KERNELSCALE_EXAMPLE_SIZE=${KERNELSCALE_EXAMPLE_SIZE:-small} mkdocs build --strict -d "$WORK/site"
python -m http.server "$PORT" --bind 127.0.0.1 --directory "$WORK/site" >"$WORK/server.log" 2>&1 &
SERVER=$!
for _ in $(seq 50); do
    if python -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/')" 2>/dev/null; then break; fi
    sleep 0.2
done

shot() {  # shot PAGE FILE WIDTHxHEIGHT
    "$CHROMIUM" --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
        --disable-background-networking --disable-component-update --disable-sync \
        --hide-scrollbars --user-data-dir="$WORK/profile" --window-size="${3/x/,}" \
        --screenshot="$WORK/$2" "http://127.0.0.1:$PORT/$1" >/dev/null 2>&1
    mkdir -p "$OUT"
    if command -v pngquant >/dev/null; then
        pngquant --force --quality 60-90 --strip --output "$OUT/$2" "$WORK/$2"
    else
        python - "$WORK/$2" "$OUT/$2" <<'EOF'
import sys
from PIL import Image
Image.open(sys.argv[1]).convert("RGB").quantize(colors=128).save(sys.argv[2], optimize=True)
EOF
    fi
    echo "$OUT/$2: $(du -k "$OUT/$2" | cut -f1) KB"
}

shot "" site-home.png 1440x2000
shot guide/slkl/ site-guide-slkl.png 1440x1500
