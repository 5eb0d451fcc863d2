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
# bubblewrap needs. Allow unprivileged user namespaces for this job's machine.
knob=/proc/sys/kernel/apparmor_restrict_unprivileged_userns
if [ -r "$knob" ] && [ "$(cat "$knob")" = 1 ]; then
  echo "This runner restricts unprivileged user namespaces (kernel.apparmor_restrict_unprivileged_userns=1);"
  echo "allowing them for this job (sysctl -w kernel.apparmor_restrict_unprivileged_userns=0) so bubblewrap can start."
  sudo_or_not sysctl -q -w kernel.apparmor_restrict_unprivileged_userns=0 \
    || echo "::warning::could not allow unprivileged user namespaces; the sandbox may not start"
fi

if command -v bwrap >/dev/null 2>&1; then
  if bwrap --ro-bind / / --proc /proc --dev /dev --unshare-all --die-with-parent -- true 2>"${RUNNER_TEMP:-/tmp}/bwrap-probe.err"; then
    echo "bubblewrap starts: $(bwrap --version)"
  else
    echo "::warning::bubblewrap cannot start here: $(head -c 500 "${RUNNER_TEMP:-/tmp}/bwrap-probe.err")"
  fi
fi
exit 0
