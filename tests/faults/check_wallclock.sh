#!/bin/sh
# Asserts from a static archive's undefined symbols that the library never
# reads the wall clock for a decision: no time(), gettimeofday(), calendar
# calls, system_clock, or timed waits that default to CLOCK_REALTIME; and
# clock_gettime/clock_nanosleep only from base/clock.cc (CLOCK_MONOTONIC or
# CLOCK_BOOTTIME). The TLS transport (transport/tls*) may use mbedTLS's
# certificate-time check, the one allowed wall-clock use.
# Usage: check_wallclock.sh NM ARCHIVE [--expect-fail]
nm_bin=$1; archive=$2; expect_fail=${3:-}
[ -r "$archive" ] || { echo "check_wallclock: no archive $archive"; exit 1; }
syms=$("$nm_bin" -A -u "$archive" 2>/dev/null) || { echo "check_wallclock: nm failed"; exit 1; }
[ -n "$syms" ] || { echo "check_wallclock: no undefined symbols read (nm output empty)"; exit 1; }
bad=$(printf '%s\n' "$syms" | awk '
  { sym = $NF; split($1, p, ":"); obj = p[2] }
  sym ~ /^(time|gettimeofday|ftime|timespec_get|clock|localtime|localtime_r|gmtime|gmtime_r|mktime|timegm|strftime|pthread_cond_timedwait|sem_timedwait|pthread_mutex_timedlock|mbedtls_time|mbedtls_platform_gmtime_r)$/ \
      && obj !~ /^transport_tls/ { print obj ": " sym; next }
  sym ~ /system_clock/ { print obj ": " sym; next }
  (sym == "clock_gettime" || sym == "clock_nanosleep") && obj != "base_clock.cc.o" { print obj ": " sym }')
objs=$(printf '%s\n' "$syms" | awk '{ split($1, p, ":"); print p[2] }' | sort -u | wc -l)
if [ -n "$bad" ]; then
  echo "check_wallclock: wall-clock use in $archive:"
  printf '%s\n' "$bad"
  [ "$expect_fail" = "--expect-fail" ] && { echo "wallclock_symbols_control: caught (as expected)"; exit 0; }
  exit 1
fi
[ "$expect_fail" = "--expect-fail" ] && { echo "check_wallclock: control archive was NOT caught"; exit 1; }
echo "wallclock_symbols: $objs objects checked, no time()/gettimeofday()/system_clock/realtime waits; clock_gettime only in base_clock.cc.o"
exit 0
