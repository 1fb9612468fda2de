#!/bin/bash
# Runs the script of inputs/inputs.json ({"script": "..."}) with bash -l in work/.
set -euo pipefail
ws=${SHIPYARD_WORKSPACE:-/workspace}
script=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["script"])' "$ws/inputs/inputs.json")
cd "$ws/work"
exec bash -lc "$script"
