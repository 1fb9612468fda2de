#!/usr/bin/env python3
"""Summarise a CSV file into a Markdown report built from a template."""
import argparse
import csv
import os


def numeric(values):
    out = []
    for v in values:
        try:
            out.append(float(v))
        except ValueError:
            return None
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("csv")
    ap.add_argument("--template", required=True)
    args = ap.parse_args()
    with open(args.csv, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    columns = list(rows[0].keys()) if rows else []
    lines = ["| column | min | max | mean |", "|---|---|---|---|"]
    for c in columns:
        nums = numeric([r[c] for r in rows if r[c] != ""])
        if nums:
            lines.append(f"| {c} | {min(nums):g} | {max(nums):g} | {sum(nums) / len(nums):g} |")
    with open(args.template, encoding="utf-8") as f:
        template = f.read()
    print(template.format(title=os.path.basename(args.csv), rows=len(rows),
                          columns=", ".join(columns), table="\n".join(lines)))


if __name__ == "__main__":
    main()
