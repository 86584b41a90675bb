#!/usr/bin/env bash
# Install the real Vicon DataStream client (pyvicon-datastream, the `vicon` extra) into a Python environment,
# built against the system Boost instead of the Boost 1.81 its CMakeLists.txt downloads from GitHub.
#
#   scripts/install_vicon_client.sh [PYTHON]        # default: .venv/bin/python if present, else python3
#
# Needs (Debian/Ubuntu): apt-get install libboost-dev libboost-system-dev libboost-thread-dev
#                        libboost-filesystem-dev cmake g++
# The sdist's files are untouched: CMake's FETCHCONTENT_SOURCE_DIR_BOOST points FetchContent at
# scripts/vicon_system_boost/, whose CMakeLists.txt finds the system Boost. The built wheel is cached under
# ${AIKO_WHEEL_CACHE:-~/.cache/aiko/wheels}, keyed by client version, Python tag, Boost version and machine, so a
# second run (CI, a fresh venv) installs in seconds instead of building for about a minute.
set -euo pipefail

VERSION="0.2.4"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO="$(dirname "$HERE")"
PY="${1:-}"
if [[ -z "$PY" ]]; then
  if [[ -x "$REPO/.venv/bin/python" ]]; then PY="$REPO/.venv/bin/python"; else PY="python3"; fi
fi

missing=()
for header in boost/version.hpp boost/asio.hpp boost/thread.hpp boost/filesystem.hpp; do
  [[ -e "/usr/include/$header" ]] || missing+=("$header")
done
compgen -G "/usr/lib/*/libboost_thread.so" >/dev/null || compgen -G "/usr/lib/libboost_thread.so" >/dev/null \
  || missing+=("libboost_thread.so")
if (( ${#missing[@]} )); then
  echo "install_vicon_client: the system Boost is missing (${missing[*]}); run:" >&2
  echo "  sudo apt-get install -y libboost-dev libboost-system-dev libboost-thread-dev libboost-filesystem-dev cmake g++" >&2
  exit 1
fi

installed="$("$PY" -c 'import importlib.metadata as m; print(m.version("pyvicon-datastream"))' 2>/dev/null || true)"
if [[ "$installed" == "$VERSION" ]] && "$PY" -c "import pyvicon_datastream" 2>/dev/null; then
  echo "pyvicon-datastream $VERSION already installed in $("$PY" -c 'import sys; print(sys.prefix)')"
  exit 0
fi

boost="$(sed -n 's/^#define BOOST_LIB_VERSION "\(.*\)"/\1/p' /usr/include/boost/version.hpp)"
pytag="$("$PY" -c 'import sys; print(f"cp{sys.version_info[0]}{sys.version_info[1]}")')"
cache_root="${AIKO_WHEEL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/aiko/wheels}"
cache="$cache_root/pyvicon-datastream-$VERSION-$pytag-boost$boost-$(uname -m)"
wheel="$(compgen -G "$cache/pyvicon_datastream-$VERSION-*.whl" | head -n1 || true)"

if [[ -z "$wheel" ]]; then
  echo "building pyvicon-datastream $VERSION against Boost $boost for $pytag (about a minute on 2 cores)"
  build="$(mktemp -d)"
  trap 'rm -rf "$build"' EXIT
  # scikit-build passes CMAKE_ARGS on to CMake; --no-binary: there is only an sdist, say so explicitly.
  CMAKE_ARGS="-DFETCHCONTENT_SOURCE_DIR_BOOST=$HERE/vicon_system_boost ${CMAKE_ARGS:-}" \
    "$PY" -m pip wheel --no-deps --no-cache-dir --no-binary pyvicon-datastream \
    "pyvicon-datastream==$VERSION" -w "$build"
  mkdir -p "$cache"
  built="$(compgen -G "$build/pyvicon_datastream-$VERSION-*.whl" | head -n1)"
  cp "$built" "$cache/"
  wheel="$cache/$(basename "$built")"
  echo "cached $wheel"
else
  echo "using the cached wheel $wheel"
fi

"$PY" -m pip install --no-deps --force-reinstall "$wheel"
"$PY" -m pip install "$wheel"  # its one dependency (numpy), where the environment lacks it
"$PY" -c "import pyvicon_datastream; pyvicon_datastream.PyViconDatastream()"
echo "pyvicon-datastream $VERSION installed"
