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
[ -x /usr/bin/chromium ] || need+=(chromium)            # the `rgt ui` browser tests
[ -x /usr/bin/chromedriver ] || need+=(chromium-driver)
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
# The tests mostly wait on sshd, Slurm and subprocesses, so more workers than cores pay;
# --dist loadgroup keeps the tests of one shared resource (tests/conftest.py) on one worker.
# RGT_TEST_WORKERS=0 runs them in this process, one after another; `-n N` in the args wins.
export RGT_UI_SCREENSHOTS="${RGT_UI_SCREENSHOTS:-$PWD/.ci-artifacts/ui}"  # browser-test screenshots
workers="${RGT_TEST_WORKERS:-4}"
parallel=(-n "$workers" --dist loadgroup)
echo "== pytest ($workers workers)" >&2
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
fi
.venv/bin/python -m pytest "${parallel[@]}" --durations=25  # the slowest, for the CI log

# The oldest Python pyproject supports (3.10), when one is on this machine (pyenv ships it):
# every module must import there, and the tests that need no torch must pass there.
oldest=""
for py in "$HOME"/.pyenv/versions/3.10*/bin/python3.10 "$(command -v python3.10 || true)"; do
  if [ -n "$py" ] && [ -x "$py" ]; then oldest="$py"; break; fi
done
if [ -z "$oldest" ]; then
  echo "dev.sh: no Python 3.10 here; the oldest-Python pass is skipped" >&2
  exit 0
fi
echo "== Python 3.10 ($oldest): import every module, tests without torch" >&2
if [ ! -x .venv-3.10/bin/python ]; then
  "$oldest" -m venv .venv-3.10
fi
stamp310=".venv-3.10/.rgt-installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp310" ]; then
  .venv-3.10/bin/pip install -q -e . pytest pytest-timeout pytest-xdist hypothesis
  touch "$stamp310"
fi
.venv-3.10/bin/python - <<'PY'
import importlib, pkgutil, rgt
bad = []
for mod in pkgutil.walk_packages(rgt.__path__, "rgt."):
    if mod.name.endswith("__main__"):
        continue
    try:
        importlib.import_module(mod.name)
    except ModuleNotFoundError as exc:  # an optional extra (torch, kubernetes, …) is fine
        if (exc.name or "").split(".")[0] in ("rgt", "tomllib"):
            bad.append(f"{mod.name}: {exc}")
    except Exception as exc:
        bad.append(f"{mod.name}: {type(exc).__name__}: {exc}")
if bad:
    raise SystemExit("modules that fail to import on Python 3.10:\n  " + "\n  ".join(bad))
print("every rgt module imports on Python 3.10")
PY
exec .venv-3.10/bin/python -m pytest -p no:cacheprovider -q "${parallel[@]}" -m "not slow" \
  tests/profiles tests/triage tests/cli \
  tests/jobs/test_store.py tests/agent/test_jobfiles.py tests/vendors/test_conformance.py \
  tests/vendors/test_offers_cli.py
