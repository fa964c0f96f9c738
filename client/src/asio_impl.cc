// Compiles Boost.Asio and Boost.Beast once for the whole project (the kinformer_asio target
// defines BOOST_ASIO_SEPARATE_COMPILATION / BOOST_BEAST_SEPARATE_COMPILATION for kinformer's own
// sources and test support), instead of in every translation unit that includes them. They are
// not exported: a consumer that uses Asio itself compiles it its own way, but must use the same
// Boost version (these out-of-line definitions are in libkinformer_client.a).
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
