// The TCP connection behind a cpp-httplib request, for handlers that wait long.
//
// cpp-httplib 0.11 hands a handler its request but not its socket, yet a handler that waits for
// a whole generation before it answers (a non-streamed completion, which must choose its status
// line at the end) has to notice a client that hung up. The socket is found among the
// process's open descriptors by the request's local and remote address and port, which name one
// connection for as long as cpp-httplib holds it open (it closes it after the handler returns).
#pragma once

#include <httplib.h>

namespace pagoda {

class HttpConnection {
 public:
  // The request's connection; an unknown one (not found) never reports closed.
  static HttpConnection Of(const httplib::Request& req);

  bool known() const { return fd_ >= 0; }
  // True once the peer has closed or reset the connection; never blocks. The descriptor is
  // cpp-httplib's: this only polls it.
  bool PeerClosed() const;

 private:
  int fd_ = -1;
};

}  // namespace pagoda
