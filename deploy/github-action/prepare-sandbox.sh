#!/usr/bin/env bash
# Make bubblewrap usable on a GitHub Actions runner (action.yml runs this before the bot).
# It says what it does. It never turns the sandbox off: where bubblewrap still cannot
# start, `bot action` says so on the issue and runs no command.
set -u

sudo_or_not() {
  if [ "$(id -u)" = 0 ]; then "$@"; elif command -v sudo >/dev/null 2>&1; then sudo -n "$@"; else return 1; fi
}

if ! command -v bwrap >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    echo "Installing bubblewrap (apt-get install bubblewrap): the agent's commands run in its sandbox."
    sudo_or_not apt-get install -y -qq bubblewrap >/dev/null \
      || { sudo_or_not apt-get update -qq >/dev/null && sudo_or_not apt-get install -y -qq bubblewrap >/dev/null; } \
      || echo "::warning::could not install bubblewrap; the agent will run no command"
  else
    echo "::warning::bubblewrap (bwrap) is not installed and there is no apt-get here; install it on this runner"
  fi
fi

# Ubuntu 24.04 lets only programs with an AppArmor profile make user namespaces, which
# bubblewrap needs. The setting is the whole machine's, so it is changed only where the
# machine is this job's alone (a GitHub-hosted runner: RUNNER_ENVIRONMENT=github-hosted)
# or where the workflow says so (`allow_kernel_change: true`), always saying so, and it is
# put back when the job ends (`prepare-sandbox.sh --restore`, a step that always runs).
knob=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
setting=kernel.apparmor_restrict_unprivileged_userns
saved="${RUNNER_TEMP:-/tmp}/coding-agent-userns.saved"

if [ "${1:-}" = --restore ]; then
  if [ -f "$saved" ]; then
    old=$(cat "$saved")
    case $old in 0|1|2) ;; *) echo "::warning::not restoring $setting: unreadable saved value"; exit 0 ;; esac
    echo "Restoring $setting=$old, as it was before this job."
    if printf '%s\n' "$old" | sudo_or_not tee "$knob" >/dev/null; then
      rm -f "$saved"
    else
      echo "::warning::could not restore $setting=$old on this machine; set it back by hand"
    fi
  fi
  exit 0
fi

if [ -r "$knob" ] && [ "$(cat "$knob")" = 1 ]; then
  if [ "${RUNNER_ENVIRONMENT:-}" = github-hosted ] || [ "${CODING_AGENT_ALLOW_KERNEL_CHANGE:-}" = true ]; then
    echo "This runner restricts unprivileged user namespaces ($setting=1);"
    echo "allowing them for this job ($setting=0, machine-wide) so bubblewrap can start; it is set back to 1 when the job ends."
    if printf '0\n' | sudo_or_not tee "$knob" >/dev/null; then
      echo 1 >"$saved"
    else
      echo "::warning::could not allow unprivileged user namespaces; the sandbox may not start"
    fi
  else
    echo "::warning::this self-hosted runner restricts unprivileged user namespaces ($setting=1), so bubblewrap may not start. The action leaves this machine-wide setting alone: give /usr/bin/bwrap an AppArmor profile with userns (deploy/README.md), or pass allow_kernel_change: true to let the action set $setting=0 for the job and restore it afterwards."
  fi
fi

if command -v bwrap >/dev/null 2>&1; then
  if bwrap --ro-bind / / --proc /proc --dev /dev --unshare-all --die-with-parent -- true 2>"${RUNNER_TEMP:-/tmp}/bwrap-probe.err"; then
    echo "bubblewrap starts: $(bwrap --version)"
  else
    echo "::warning::bubblewrap cannot start here: $(head -c 500 "${RUNNER_TEMP:-/tmp}/bwrap-probe.err")"
  fi
fi
exit 0
