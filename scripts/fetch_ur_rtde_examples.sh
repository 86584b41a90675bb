#!/usr/bin/env bash
# Fetch ur_rtde's own example programs and documentation (its sdist on PyPI, the release the lock pins) for the
# vendor-examples harness (tests/aiko/devices/ur/test_vendor_examples.py, docs/ur3.md "The vendor's examples").
#
#   scripts/fetch_ur_rtde_examples.sh [PYTHON]        # default: .venv/bin/python if present, else python3
#
# pip downloads the sdist (hash-checked: the same bytes the harness was written against) into
# ${AIKO_UR_RTDE_EXAMPLES:-~/.cache/aiko/ur_rtde-1.6.5}; only examples/py, doc/ and LICENSE are kept. Nothing is
# committed to this repository and the test suite downloads nothing: it skips, saying so, when this was not run.
set -euo pipefail

VERSION="1.6.5"
SHA256="3d5b6c6bf73346b806d146f128537abd2afb1d769f4a9c8b3ef5a884fab0bcfa"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PY="${1:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PY="$REPO/.venv/bin/python"; else PY="python3"; fi
fi
DEST="${AIKO_UR_RTDE_EXAMPLES:-$HOME/.cache/aiko/ur_rtde-$VERSION}"
if [[ -f "$DEST/.complete" ]]; then
  echo "ur_rtde $VERSION examples already in $DEST"
  exit 0
fi
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
echo "ur_rtde==$VERSION --hash=sha256:$SHA256" > "$work/requirement.txt"
"$PY" -m pip download --quiet --no-deps --no-binary :all: --no-build-isolation --require-hashes \
  -r "$work/requirement.txt" -d "$work" 2>/dev/null \
  || "$PY" -m pip download --quiet --no-deps --no-binary :all: --require-hashes -r "$work/requirement.txt" -d "$work"
tar -xzf "$work/ur_rtde-$VERSION.tar.gz" -C "$work" \
  "ur_rtde-$VERSION/examples/py" "ur_rtde-$VERSION/doc" "ur_rtde-$VERSION/LICENSE"
rm -rf "$DEST"
mkdir -p "$(dirname "$DEST")"
mv "$work/ur_rtde-$VERSION" "$DEST"
touch "$DEST/.complete"
echo "ur_rtde $VERSION examples in $DEST"
