"""Runs the program of inputs/inputs.json ({"code": "..."}) in work/ as __main__."""
import json
import os
import runpy
import sys

ws = os.environ.get("SHIPYARD_WORKSPACE", "/workspace")
with open(os.path.join(ws, "inputs", "inputs.json"), encoding="utf-8") as f:
    code = json.load(f)["code"]
os.chdir(os.path.join(ws, "work"))
path = os.path.join(ws, "work", ".python.run.main.py")
with open(path, "w", encoding="utf-8") as f:
    f.write(code)
sys.argv = [path]
runpy.run_path(path, run_name="__main__")
