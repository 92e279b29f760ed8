// Content hashing for the artifact cache and provenance.
#pragma once

#include <string>
#include <string_view>

namespace kforge {

/// SHA-256 (FIPS 180-4, via OpenSSL's libcrypto) of `bytes`, as 64 lowercase hex digits.
std::string sha256_hex(std::string_view bytes);

}  // namespace kforge
