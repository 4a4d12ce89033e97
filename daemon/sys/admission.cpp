// SPDX-License-Identifier: GPL-2.0
#include "daemon/sys/admission.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

namespace stackmapd {

std::string Admission::peer_of(int fd) {
  sockaddr_storage ss = {};
  socklen_t len = sizeof(ss);
  if (getpeername(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return "?";
  char buf[INET6_ADDRSTRLEN] = {};
  switch (ss.ss_family) {
    case AF_INET:
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&ss)->sin_addr, buf, sizeof(buf));
      return buf;
    case AF_INET6:
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&ss)->sin6_addr, buf, sizeof(buf));
      return buf;
    case AF_UNIX: {
      ucred cred = {};
      socklen_t n = sizeof(cred);
      if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &n) == 0)
        return "uid " + std::to_string(cred.uid);
      break;
    }
  }
  return "?";
}

uint64_t Admission::oldest_incomplete(const std::string* peer) const {
  for (const auto& [key, e] : conns_)
    if (e.incomplete && (!peer || e.peer == *peer)) return key;
  return 0;
}

Admission::Decision Admission::decide(const std::string& peer) const {
  auto it = per_peer_.find(peer);
  if (it != per_peer_.end() && it->second >= limits_.max_per_peer) {
    uint64_t victim = oldest_incomplete(&peer);
    return {victim != 0, victim};
  }
  if (conns_.size() >= limits_.max_total) {
    uint64_t victim = oldest_incomplete(nullptr);
    return {victim != 0, victim};
  }
  return {true, 0};
}

void Admission::add(uint64_t key, const std::string& peer) {
  conns_[key] = Entry{peer, true};
  ++per_peer_[peer];
}

void Admission::completed(uint64_t key) {
  if (auto it = conns_.find(key); it != conns_.end()) it->second.incomplete = false;
}

void Admission::remove(uint64_t key) {
  auto it = conns_.find(key);
  if (it == conns_.end()) return;
  if (auto p = per_peer_.find(it->second.peer); p != per_peer_.end() && --p->second == 0)
    per_peer_.erase(p);
  conns_.erase(it);
}

}  // namespace stackmapd
