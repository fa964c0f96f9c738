// Compiles Boost.Asio and Boost.Beast once for the whole project
// (BOOST_ASIO_SEPARATE_COMPILATION / BOOST_BEAST_SEPARATE_COMPILATION are public definitions
// of kinformer::client), instead of in every translation unit that includes them.
#include <boost/asio/impl/src.hpp>
#include <boost/asio/ssl/impl/src.hpp>
#include <boost/beast/src.hpp>
