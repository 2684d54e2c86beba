#!/bin/sh
# Asserts that a linked program does not hold the routed steps of a
# request (LeaseCore::kRouter and what it reaches): a program that uses
# only Connection and Lock must not carry Sentinel's and Cluster's routing.
# With --expect-present (the control) the program must hold them.
# Usage: check_unlinked.sh NM PROGRAM [--expect-present]
nm_bin=$1; program=$2; mode=${3:-}
[ -r "$program" ] || { echo "check_unlinked: no program $program"; exit 1; }
syms=$("$nm_bin" -C "$program" 2>/dev/null) || { echo "check_unlinked: nm failed"; exit 1; }
[ -n "$syms" ] || { echo "check_unlinked: no symbols read (stripped?)"; exit 1; }
found=$(printf '%s\n' "$syms" | grep -cE 'LeaseCore::(kRouter|start_route|reroute|resend_due)')
if [ "$mode" = "--expect-present" ]; then
  [ "$found" -gt 0 ] || { echo "check_unlinked: $program should hold the routed steps and does not"; exit 1; }
  echo "routes_linked_control: $found routed-step symbols in $program (as expected)"
  exit 0
fi
[ "$found" -eq 0 ] || { echo "check_unlinked: $program holds $found routed-step symbols:";
  printf '%s\n' "$syms" | grep -E 'LeaseCore::(kRouter|start_route|reroute|resend_due)'; exit 1; }
echo "routes_unlinked: $program holds none of the routed steps"
