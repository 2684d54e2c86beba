#pragma once
/// @file edgelock.h
/// Everything a program needs to lock with edgelock.

#include "edgelock/admission.h"
#include "edgelock/clock.h"
#include "edgelock/cluster.h"
#include "edgelock/connection.h"
#include "edgelock/endpoint.h"
#include "edgelock/fair_lock.h"
#include "edgelock/lease.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/lock.h"
#include "edgelock/lock_guard.h"
#include "edgelock/metrics.h"
#include "edgelock/quorum_lock.h"
#include "edgelock/rate_limiter.h"
#include "edgelock/reentrant_lock.h"
#include "edgelock/semaphore.h"
#include "edgelock/sentinel.h"
#include "edgelock/status.h"
