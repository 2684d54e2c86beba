#pragma once
/// @file edgelock.h
/// Everything a program needs to lock with edgelock.

#include "edgelock/clock.h"
#include "edgelock/connection.h"
#include "edgelock/endpoint.h"
#include "edgelock/lease_keeper.h"
#include "edgelock/lock.h"
#include "edgelock/lock_guard.h"
#include "edgelock/status.h"
