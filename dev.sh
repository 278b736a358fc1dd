#!/usr/bin/env bash
# Set up rgt in .venv/ and run the demo or the test suite. Idempotent; safe to re-run.
#   bash dev.sh demo   - create .venv, install rgt + CPU torch, run `rgt demo`
#   bash dev.sh test   - the same with the test extras, system packages, lint, types, tests
set -euo pipefail
cd "$(dirname "$0")"
what="${1:-}"; shift || true
case "$what" in demo|test) ;; *) echo "usage: bash dev.sh demo|test [args…]" >&2; exit 2;; esac

pick_python() {
  for py in python3.13 python3.12 python3.11 python3.10 python3; do
    if command -v "$py" >/dev/null 2>&1 &&
       "$py" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
      echo "$py"; return 0
    fi
  done
  echo "dev.sh: need Python >= 3.10 on PATH" >&2; return 1
}

if [ ! -x .venv/bin/python ]; then
  "$(pick_python)" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
extras=demo; [ "$what" = test ] && extras=test
stamp=".venv/.rgt-installed-$extras-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  # torch is pinned in pyproject.toml: the CPU wheel, never a range that pulls a CUDA build.
  .venv/bin/pip install -q -e ".[$extras]"
  touch "$stamp"
fi

if [ "$what" = demo ]; then
  exec .venv/bin/rgt demo "$@"
fi

# System packages the tests start for real: OpenSSH server, rsync, tmux.
need=()
command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || need+=(openssh-server)
command -v rsync >/dev/null 2>&1 || need+=(rsync)
command -v tmux >/dev/null 2>&1 || need+=(tmux)
command -v slurmctld >/dev/null 2>&1 || need+=(slurm-wlm)
command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || need+=(munge)
if [ "${#need[@]}" -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "dev.sh: installing ${need[*]}" >&2
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  else
    echo "dev.sh: missing ${need[*]} (tests that need them will be skipped); install as root" >&2
  fi
fi

echo "== ruff" >&2
.venv/bin/ruff check src tests bench examples
.venv/bin/ruff format --check src tests bench examples
echo "== mypy" >&2
.venv/bin/mypy
echo "== pytest" >&2
exec .venv/bin/python -m pytest "$@"
