#!/usr/bin/env bash
# Static checks: ansible-lint (production profile, config in .ansible-lint), the YAML trap check
# (list items that parse as mappings, scripts/check_yaml_traps.py), the roles' variable contract (defaults,
# argument specs and README tables agree, scripts/check_role_contract.py) and the changelog fragments.
set -euo pipefail
cd "$(dirname "$0")/.."
ansible-lint --profile production
python scripts/check_yaml_traps.py
python scripts/check_role_contract.py
antsibull-changelog lint
echo "lint: ansible-lint (production), YAML traps, role contract and antsibull-changelog lint clean"
