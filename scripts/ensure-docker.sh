#!/usr/bin/env bash
# Make sure a Docker engine answers on /var/run/docker.sock.
# On a bare Debian machine (docker client only, no engine) install Debian's docker.io and start
# dockerd in the background: there is no systemd as PID 1 on the CI VM to start it for us.
set -euo pipefail

engine_answers() { docker info >/dev/null 2>&1; }

if engine_answers; then
  echo "docker: engine already answering"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "docker: no engine installed; installing Debian's docker.io"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq docker.io >/dev/null
fi

echo "docker: starting dockerd (log: /var/log/dockerd.log)"
nohup dockerd >/var/log/dockerd.log 2>&1 &
for _ in $(seq 1 60); do
  if engine_answers; then
    echo "docker: engine up ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
    exit 0
  fi
  sleep 1
done
echo "docker: dockerd did not answer within 60 s; last log lines:" >&2
tail -n 20 /var/log/dockerd.log >&2
exit 1
