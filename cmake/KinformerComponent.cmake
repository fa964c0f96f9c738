# kinformer_component(NAME [EXPORT_SET SET] SOURCES ... DEPS ...): one library target per
# component, with an alias kinformer::NAME, public headers under NAME/include, installed and
# exported (in kinformerTargets unless EXPORT_SET names another).
function(kinformer_component name)
  cmake_parse_arguments(ARG "" "EXPORT_SET" "SOURCES;PUBLIC_DEPS;PRIVATE_DEPS;PUBLIC_DEFS" ${ARGN})
  add_library(kinformer_${name} ${ARG_SOURCES})
  add_library(kinformer::${name} ALIAS kinformer_${name})
  set_target_properties(kinformer_${name} PROPERTIES EXPORT_NAME ${name} OUTPUT_NAME kinformer_${name}
    VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR}.${PROJECT_VERSION_MINOR})
  # A consumer gets C++20 from the target: it need not set the standard itself.
  target_compile_features(kinformer_${name} PUBLIC cxx_std_20)
  target_include_directories(kinformer_${name} PUBLIC
    $<BUILD_INTERFACE:${CMAKE_CURRENT_SOURCE_DIR}/include>
    $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>
    PRIVATE ${CMAKE_CURRENT_SOURCE_DIR}/src)
  target_link_libraries(kinformer_${name} PUBLIC ${ARG_PUBLIC_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
  # Unity sources (KINFORMER_UNITY_BUILD): the library's files share one parse of Asio, Beast and
  # the standard library and one instantiation of their templates, about half its compile time
  # in a build made once (sanitizers, fuzzing); an edit then recompiles a whole unity source.
  # A file with compile options of its own is compiled alone (CMake's rule).
  if(KINFORMER_UNITY_BUILD)
    set_target_properties(kinformer_${name} PROPERTIES UNITY_BUILD ON)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # GCC takes a class (a coroutine's frame) defined in an included source for one defined in
      # a header, and warns of its members of anonymous-namespace types: a false alarm here.
      target_compile_options(kinformer_${name} PRIVATE -Wno-subobject-linkage)
    endif()
  endif()
  if(ARG_PUBLIC_DEFS)
    target_compile_definitions(kinformer_${name} PUBLIC ${ARG_PUBLIC_DEFS})
  endif()
  if(NOT ARG_EXPORT_SET)
    set(ARG_EXPORT_SET kinformerTargets)
  endif()
  install(TARGETS kinformer_${name} EXPORT ${ARG_EXPORT_SET}
    ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR} LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(DIRECTORY include/ DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
endfunction()
