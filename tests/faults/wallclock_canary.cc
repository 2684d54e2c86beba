// Control for check_wallclock.sh: an object that reads the wall clock the
// ways the library must not, so the check is shown to catch them.
#include <sys/time.h>

#include <ctime>

long wallclock_canary() {
  timeval tv{};
  gettimeofday(&tv, nullptr);
  return static_cast<long>(time(nullptr)) + tv.tv_sec;
}
