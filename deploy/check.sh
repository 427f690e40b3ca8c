#!/usr/bin/env bash
# deploy/ for real where Docker with Compose is installed (.ci/run calls this): the compose
# file as `docker compose config` reads it, and the image built and started once.
# Without Docker, tests/test_deploy.py checks the same files (it always runs).
set -euo pipefail
cd "$(dirname "$0")/.."
if ! docker compose version >/dev/null 2>&1 || ! docker info >/dev/null 2>&1; then
    echo "deploy/check.sh: no Docker engine with Compose here; tests/test_deploy.py validates deploy/ instead"
    exit 0
fi
env=$(mktemp)
made=""
trap 'rm -f "$env" $made' EXIT
sed -e 's/^TELEGRAM_BOT_TOKEN=$/TELEGRAM_BOT_TOKEN=123:ci/' -e 's/^POSTGRES_PASSWORD=$/POSTGRES_PASSWORD=ci/' deploy/.env.example > "$env"
if [ ! -e deploy/.env ]; then  # the workers' env_file; a real deployment has its own
    cp "$env" deploy/.env
    made=deploy/.env
fi
docker compose -f deploy/compose.yaml --env-file "$env" config --quiet
# Every required setting stops it when missing.
for name in TELEGRAM_BOT_TOKEN POSTGRES_PASSWORD WEBHOOK_HOST HUB_MODEL; do
    if grep -v "^$name=" "$env" | docker compose -f deploy/compose.yaml --env-file /dev/stdin config --quiet 2>/dev/null; then
        echo "deploy/check.sh: compose started without $name" >&2
        exit 1
    fi
done
docker build -f deploy/Dockerfile -t agents-hub:ci .
docker run --rm agents-hub:ci agents-hub --version
docker run --rm agents-hub:ci sh -c 'test ! -e /src/.env && test ! -e /src/.venv && test ! -e /src/tests'
echo "deploy/check.sh: compose config, image build and run: ok"
