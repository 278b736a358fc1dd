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

# Slow set-up steps run in the background, each with its log: `bg NAME CMD…` starts one,
# `bg_wait NAME` waits for it and, when it failed, prints its log's tail and returns 1.
declare -A bg_pid=() bg_log=()
bg() {
  local name="$1"; shift
  bg_log[$name]="$(mktemp -t rgt-setup.XXXXXX)"
  "$@" >"${bg_log[$name]}" 2>&1 &
  bg_pid[$name]=$!
}
bg_wait() {
  local name="$1" pid
  [ -n "$name" ] && pid="${bg_pid[$name]:-}" && [ -n "$pid" ] || return 0
  unset "bg_pid[$name]"
  if ! wait "$pid"; then
    tail -n 30 "${bg_log[$name]}" >&2
    echo "dev.sh: $name failed (its log above)" >&2
    return 1
  fi
  rm -f "${bg_log[$name]}"
}
# Leaving early (a lint error, a failed pip) still waits: apt-get is never cut off inside dpkg.
bg_reap() {
  local name
  for name in "${!bg_pid[@]}"; do wait "${bg_pid[$name]}" 2>/dev/null || true; done
  for name in "${!bg_log[@]}"; do rm -f "${bg_log[$name]}"; done
}
trap bg_reap EXIT

# System packages the tests start for real, one line per package (the command it provides,
# then the Debian package): OpenSSH server, rsync, tmux, Slurm, munge, Chromium.
apt_need() {
  command -v sshd >/dev/null 2>&1 || [ -x /usr/sbin/sshd ] || echo openssh-server
  command -v rsync >/dev/null 2>&1 || echo rsync
  command -v tmux >/dev/null 2>&1 || echo tmux
  command -v slurmctld >/dev/null 2>&1 || echo slurm-wlm
  command -v munged >/dev/null 2>&1 || [ -x /usr/sbin/munged ] || echo munge
  command -v ip >/dev/null 2>&1 || [ -x /usr/sbin/ip ] || echo iproute2  # network-namespace nodes
  [ -x /usr/bin/chromium ] || echo chromium  # the `rgt ui` browser tests
  [ -x /usr/bin/chromedriver ] || echo chromium-driver
}
apt_install() {
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "$@"
}
# apt-get runs while pip installs (a minute of CI wall time); pytest waits for both.
apt_job=""
if [ "$what" = test ]; then
  mapfile -t need < <(apt_need)
  if [ "${#need[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
      echo "dev.sh: installing ${need[*]} in the background" >&2
      apt_job="apt-get install ${need[*]}"
      bg "$apt_job" apt_install "${need[@]}"
    else
      echo "dev.sh: missing ${need[*]} (tests that need them will be skipped); install as root" >&2
    fi
  fi
fi

if [ ! -x .venv/bin/python ]; then
  "$(pick_python)" -m venv .venv
fi
export PIP_DISABLE_PIP_VERSION_CHECK=1
extras=demo; [ "$what" = test ] && extras=test
stamp=".venv/.rgt-installed-$extras-$(cat pyproject.toml | sha256sum | cut -c1-16)"
if [ ! -f "$stamp" ]; then
  # torch is pinned in pyproject.toml: the CPU wheel, never a range that pulls a CUDA build.
  if ! .venv/bin/pip install -q -e ".[$extras]"; then
    echo "dev.sh: pip install -e '.[$extras]' failed (its output above)" >&2
    exit 1
  fi
  touch "$stamp"
fi

if [ "$what" = demo ]; then
  exec .venv/bin/rgt demo "$@"
fi

# The oldest Python pyproject supports (3.10), when one is on this machine (pyenv ships it):
# every module must import there, and the tests that need no torch must pass there. Its venv
# is set up in the background during lint and the main test run (the full run only).
oldest=""
for py in "$HOME"/.pyenv/versions/3.10*/bin/python3.10 "$(command -v python3.10 || true)"; do
  if [ -n "$py" ] && [ -x "$py" ]; then oldest="$py"; break; fi
done
venv310() {
  [ -x .venv-3.10/bin/python ] || "$oldest" -m venv .venv-3.10
  local stamp310=".venv-3.10/.rgt-installed-$(cat pyproject.toml | sha256sum | cut -c1-16)"
  if [ ! -f "$stamp310" ]; then
    # The releases the main venv pins (pyproject `test`); hypothesis's last for Python 3.10.
    .venv-3.10/bin/pip install -q -e . pytest==9.2.0 pytest-timeout==2.4.0 pytest-xdist==3.8.0 \
      hypothesis==6.168.5
    touch "$stamp310"
  fi
}
if [ "$#" -eq 0 ] && [ -n "$oldest" ]; then
  bg "the Python 3.10 venv" venv310
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
# The fast tier (`-m "not slow"`) is CPU-bound: two workers on two cores beat four there.
workers="${RGT_TEST_WORKERS:-}"
if [ -z "$workers" ]; then
  case " $* " in *"not slow"*) workers=2 ;; *) workers=4 ;; esac
fi
parallel=(-n "$workers" --dist loadgroup)
bg_wait "$apt_job" || exit 1
echo "== pytest ($workers workers)" >&2
if [ "$#" -gt 0 ]; then
  exec .venv/bin/python -m pytest "${parallel[@]}" "$@"
fi
.venv/bin/python -m pytest "${parallel[@]}" --durations=25  # the slowest, for the CI log

if [ -z "$oldest" ]; then
  echo "dev.sh: no Python 3.10 here; the oldest-Python pass is skipped" >&2
  exit 0
fi
echo "== Python 3.10 ($oldest): import every module, tests without torch" >&2
bg_wait "the Python 3.10 venv" || exit 1
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
