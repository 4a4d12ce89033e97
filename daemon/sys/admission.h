// SPDX-License-Identifier: GPL-2.0
// Who gets a connection slot of the stream server (stream_server.h), so that
// clients that never finish their request (slowloris) cannot keep the
// well-behaved ones out:
//   - each peer (a TCP source address; a unix socket's uid, SO_PEERCRED) holds
//     at most max_per_peer slots, the server at most max_total;
//   - a newcomer that would pass either cap evicts the connection, of that
//     peer or of any, that has waited longest for its request to end. A
//     well-behaved client sends its request at once, so it is never that
//     one; a trickler is, however it trickles. Refusing the newcomer instead
//     would hand the slots to whoever took them first; sparing the young
//     ones for a while would open a window, each time tricklers reconnect
//     together, in which every newcomer is refused.
//   - only when every connection concerned has sent its request (it is being
//     answered or read, each under its own deadline) is the newcomer refused.
// Keys are the server's connection keys, given in accept order.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

namespace stackmapd {

class Admission {
 public:
  struct Limits {
    size_t max_total;
    size_t max_per_peer;
  };
  explicit Admission(Limits limits) : limits_(limits) {}

  // The peer at the other end of the connected socket `fd`: "uid N" for a
  // unix socket, the address without its port for TCP.
  static std::string peer_of(int fd);

  struct Decision {
    bool admit = false;
    uint64_t evict = 0;  // when admitted: drop this connection first (0: none)
  };
  Decision decide(const std::string& peer) const;

  void add(uint64_t key, const std::string& peer);  // its request is incomplete
  void completed(uint64_t key);                     // no longer evictable
  void remove(uint64_t key);

 private:
  struct Entry {
    std::string peer;
    bool incomplete = true;
  };
  uint64_t oldest_incomplete(const std::string* peer) const;  // 0: none

  Limits limits_;
  std::map<uint64_t, Entry> conns_;  // by key: the first incomplete one is the oldest
  std::map<std::string, size_t> per_peer_;
};

}  // namespace stackmapd
