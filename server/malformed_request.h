// Requests whose bytes are not a valid protobuf encoding of the method's request message.
//
// gRPC's callback API answers them UNIMPLEMENTED with empty details before any Pagoda code runs,
// and libprotobuf logs one ERROR line per request with invalid UTF-8 in a string field, to
// stderr, unthrottled. This module turns the first into INVALID_ARGUMENT with a message (a
// server interceptor that notices the failed parse and rewrites the status it sends) and the
// second into a throttled spdlog warning.
#pragma once

#include <grpcpp/support/server_interceptor.h>

#include <memory>

namespace pagoda {

// Register with ServerBuilder::experimental().SetInterceptorCreators.
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
MakeMalformedRequestInterceptorFactory();

// Routes libprotobuf's log lines to spdlog: fatal/error ones at warning level, at most one per
// 10 s (with a count of those dropped in between). Process-wide (libprotobuf has one handler);
// call once at start-up.
void RouteProtobufLogsToSpdlog();

}  // namespace pagoda
