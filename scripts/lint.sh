#!/usr/bin/env bash
# Static checks: ansible-lint (production profile, config in .ansible-lint) and the changelog fragments.
set -euo pipefail
cd "$(dirname "$0")/.."
ansible-lint --profile production
antsibull-changelog lint
echo "lint: ansible-lint (production) and antsibull-changelog lint clean"
