#pragma once
/// @file limits.h
/// Compile-time capacities. Every buffer in the library is sized here (or by
/// Meson options that override these), so the RAM a connection or a lock
/// needs is known before the program runs. Going over one is an error
/// (kBufferTooSmall / kInvalidArgument), never a silent truncation.

#include <chrono>
#include <cstddef>

namespace edgelock {

#ifndef EDGELOCK_MAX_KEY_LEN
#define EDGELOCK_MAX_KEY_LEN 256
#endif
#ifndef EDGELOCK_TX_BUFFER_SIZE
#define EDGELOCK_TX_BUFFER_SIZE 1792
#endif
#ifndef EDGELOCK_RX_BUFFER_SIZE
#define EDGELOCK_RX_BUFFER_SIZE 1024
#endif
#ifndef EDGELOCK_MAX_CLUSTER_NODES
#define EDGELOCK_MAX_CLUSTER_NODES 8
#endif
#ifndef EDGELOCK_MAX_QUORUM_SERVERS
#define EDGELOCK_MAX_QUORUM_SERVERS 7
#endif

/// Longest lock key, in bytes.
constexpr size_t kMaxKeyLen = EDGELOCK_MAX_KEY_LEN;
/// Longest owner token, in bytes (ours are 32 hex chars = 128 random bits).
constexpr size_t kMaxTokenLen = 64;
/// Bytes of the per-connection command buffer. It must hold the longest
/// EVAL a primitive sends (a script's whole body, re-sent after NOSCRIPT,
/// with keys at kMaxKeyLen): the build checks this (src/eval_capacity.h)
/// and names the Meson option to raise (tx_buffer_size).
constexpr size_t kTxBufferSize = EDGELOCK_TX_BUFFER_SIZE;
/// Bytes of the per-connection receive buffer (inside the hiredis reader,
/// sized once when the connection is set up).
constexpr size_t kRxBufferSize = EDGELOCK_RX_BUFFER_SIZE;
/// Reply nodes per reply (an array and its elements each take one).
constexpr size_t kReplyNodes = 16;
/// Bytes of string data per reply.
constexpr size_t kReplyArenaBytes = 512;
/// Bytes of the fixed error text kept by a connection.
constexpr size_t kErrorTextSize = 128;
/// Host name / path / credential capacities of an endpoint.
constexpr size_t kMaxHostLen = 255;
constexpr size_t kMaxPathLen = 107;  // sun_path is 108 bytes with the NUL
constexpr size_t kMaxUserLen = 64;
constexpr size_t kMaxPasswordLen = 128;
/// Addresses kept from one host name lookup, IPv4 first (the rest are
/// dropped): a Redis server's name rarely has more.
constexpr size_t kMaxHostAddresses = 2;
/// Cluster nodes a Cluster can hold (seeds and discovered primaries): one
/// Connection (~4.2 KB on x86-64) each, in a fixed array (Meson: max_cluster_nodes).
constexpr size_t kMaxClusterNodes = EDGELOCK_MAX_CLUSTER_NODES;
/// Sentinels a Sentinel can list, and the longest monitored master name.
constexpr size_t kMaxSentinels = 8;
constexpr size_t kMaxMasterNameLen = 64;
/// Redirects (MOVED/ASK) and TRYAGAIN rounds one cluster command follows
/// before giving up (the operation's deadline usually ends it first).
constexpr int kMaxRedirects = 16;
/// Most servers one QuorumLock spans (its fixed per-server arrays).
constexpr size_t kMaxQuorumServers = EDGELOCK_MAX_QUORUM_SERVERS;
static_assert(kMaxQuorumServers >= 7, "a quorum lock must span at least 7 servers");
/// Longest lock TTL accepted (Redis accepts more; a year is plenty for a lease).
constexpr std::chrono::milliseconds kMaxTtl = std::chrono::hours(24 * 365);

}  // namespace edgelock
