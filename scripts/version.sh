#!/bin/sh
# Prints Shipyard's version from git, for the Makefile's -ldflags: a release tag vX.Y.Z
# describing HEAD gives X.Y.Z (X.Y.Z-N-gHASH after it, with -dirty for local changes); without
# a tag, 0.1.0-dev+gHASH (.dirty); outside a git checkout, 0.1.0-dev.
set -eu
if v=$(git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null); then
	echo "${v#v}"
elif h=$(git rev-parse --short HEAD 2>/dev/null); then
	d=""
	git diff --quiet HEAD 2>/dev/null || d=".dirty"
	echo "0.1.0-dev+g$h$d"
else
	echo "0.1.0-dev"
fi
