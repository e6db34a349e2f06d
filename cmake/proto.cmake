# pillar_proto_library(<target> <file.proto>): a static library of the
# generated message and gRPC service code. protobuf_generate() in CMake 3.25
# mangles import paths, so protoc is called directly.
set(PILLAR_PROTO_ROOT ${CMAKE_SOURCE_DIR}/proto)
set(PILLAR_PROTO_OUT ${CMAKE_BINARY_DIR}/gen)
file(MAKE_DIRECTORY ${PILLAR_PROTO_OUT})

function(pillar_proto_library target proto)
  get_filename_component(abs ${proto} ABSOLUTE)
  file(RELATIVE_PATH rel ${PILLAR_PROTO_ROOT} ${abs})
  string(REGEX REPLACE "\\.proto$" "" stem ${rel})
  set(outs
    ${PILLAR_PROTO_OUT}/${stem}.pb.cc ${PILLAR_PROTO_OUT}/${stem}.pb.h
    ${PILLAR_PROTO_OUT}/${stem}.grpc.pb.cc ${PILLAR_PROTO_OUT}/${stem}.grpc.pb.h)
  add_custom_command(
    OUTPUT ${outs}
    COMMAND protobuf::protoc
      --proto_path=${PILLAR_PROTO_ROOT}
      --proto_path=${Protobuf_INCLUDE_DIRS}
      --cpp_out=${PILLAR_PROTO_OUT}
      --grpc_out=${PILLAR_PROTO_OUT}
      --plugin=protoc-gen-grpc=$<TARGET_FILE:gRPC::grpc_cpp_plugin>
      ${abs}
    DEPENDS ${abs} protobuf::protoc gRPC::grpc_cpp_plugin
    COMMENT "protoc ${rel}")
  add_library(${target} STATIC ${outs})
  target_include_directories(${target} SYSTEM PUBLIC ${PILLAR_PROTO_OUT})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf gRPC::grpc++)
  # Generated code at -O1 halves csi.pb.cc's compile time and memory.
  target_compile_options(${target} PRIVATE -O1 -w)
endfunction()
