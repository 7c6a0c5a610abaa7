#include "server/http_connection.h"

#include <dirent.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <string>

namespace pagoda {
namespace {

// The numeric host and the port of an address, as cpp-httplib writes them into a Request.
bool HostAndPort(const sockaddr_storage& addr, socklen_t len, std::string* host, int* port) {
  char buf[NI_MAXHOST];
  if (getnameinfo(reinterpret_cast<const sockaddr*>(&addr), len, buf, sizeof(buf), nullptr, 0,
                  NI_NUMERICHOST) != 0) {
    return false;
  }
  *host = buf;
  if (addr.ss_family == AF_INET) {
    *port = ntohs(reinterpret_cast<const sockaddr_in*>(&addr)->sin_port);
  } else if (addr.ss_family == AF_INET6) {
    *port = ntohs(reinterpret_cast<const sockaddr_in6*>(&addr)->sin6_port);
  } else {
    return false;
  }
  return true;
}

// Whether `fd` is a connected socket with the request's local and remote address.
bool IsRequestSocket(int fd, const httplib::Request& req) {
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  sockaddr_storage addr{};
  socklen_t len = sizeof(addr);
  std::string host;
  int port = -1;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      !HostAndPort(addr, len, &host, &port) || port != req.local_port || host != req.local_addr) {
    return false;
  }
  len = sizeof(addr);
  return getpeername(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0 &&
         HostAndPort(addr, len, &host, &port) && port == req.remote_port && host == req.remote_addr;
}

}  // namespace

HttpConnection HttpConnection::Of(const httplib::Request& req) {
  HttpConnection c;
  std::unique_ptr<DIR, int (*)(DIR*)> dir(opendir("/proc/self/fd"), &closedir);
  if (!dir || req.local_port < 0 || req.remote_port < 0) return c;
  const int own_fd = dirfd(dir.get());
  while (const dirent* e = readdir(dir.get())) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0' || fd == own_fd) continue;
    if (IsRequestSocket(static_cast<int>(fd), req)) {
      c.fd_ = static_cast<int>(fd);
      break;
    }
  }
  return c;
}

bool HttpConnection::PeerClosed() const {
  if (fd_ < 0) return false;
  pollfd p{fd_, POLLRDHUP, 0};
  return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

}  // namespace pagoda
