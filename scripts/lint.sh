#!/usr/bin/env bash
# Static checks: ansible-lint (production profile, config in .ansible-lint), the YAML trap check
# (list items that parse as mappings, scripts/check_yaml_traps.py) and the changelog fragments.
set -euo pipefail
cd "$(dirname "$0")/.."
ansible-lint --profile production
python scripts/check_yaml_traps.py
antsibull-changelog lint
echo "lint: ansible-lint (production), YAML traps and antsibull-changelog lint clean"
