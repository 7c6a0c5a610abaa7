# Writes the fuzz seed corpus: OUT/<target>/ for each target in tests/fuzz/CMakeLists.txt.
# Run at build time: cmake -DSHARED=../shared -DSRC=<repo> -DOUT=<dir> -DPROTOC=protoc -P this.
# Files missing from ../shared are an error (a replay of a partial corpus would test less
# than it claims).
set(here ${CMAKE_CURRENT_LIST_DIR})
file(REMOVE_RECURSE ${OUT})
file(MAKE_DIRECTORY ${OUT})

function(copy_shared target)
  file(MAKE_DIRECTORY ${OUT}/${target})
  foreach(rel ${ARGN})
    file(GLOB files ${SHARED}/${rel})
    if(NOT files)
      message(FATAL_ERROR "fuzz corpus: ${SHARED}/${rel} not found (the shared test data)")
    endif()
    file(COPY ${files} DESTINATION ${OUT}/${target})
  endforeach()
endfunction()

execute_process(COMMAND /usr/bin/python3 ${here}/make_seeds.py
                        --gguf ${SHARED}/models/aidreams260K/aidreams260K-f32.gguf --out ${OUT}
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "fuzz corpus: make_seeds.py failed (${rc})")
endif()
copy_shared(gguf models/aidreams260K/aidreams260K-f32.gguf models/synth-gqa/llama-gqa-q4_k_m.gguf)
copy_shared(tokenizer_json tokenizers/gpt2-bpe/tokenizer.json)
copy_shared(tokenizer_model tokenizers/llama2-spm/tokenizer.model)
copy_shared(chat_template chat-templates/*.jinja)

# Text seeds kept in the repo (ours), and the repo's own configs.
file(GLOB seed_dirs LIST_DIRECTORIES true ${here}/seeds/*)
foreach(dir ${seed_dirs})
  get_filename_component(target ${dir} NAME)
  file(GLOB files ${dir}/*)
  file(COPY ${files} DESTINATION ${OUT}/${target})
endforeach()
file(GLOB configs ${SRC}/configs/*.yaml)
file(COPY ${configs} DESTINATION ${OUT}/config_yaml)

# gRPC requests: text-format protobuf in the repo, binary in the corpus.
file(GLOB txtpbs ${OUT}/grpc_request/*.txtpb)
foreach(txt ${txtpbs})
  get_filename_component(stem ${txt} NAME_WE)
  execute_process(COMMAND ${PROTOC} --encode=pagoda.v1.GenerateRequest -I ${SRC}/proto
                          pagoda/v1/generation.proto
                  INPUT_FILE ${txt} OUTPUT_FILE ${OUT}/grpc_request/${stem}.bin RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "fuzz corpus: protoc could not encode ${txt}")
  endif()
  file(REMOVE ${txt})
endforeach()
file(TOUCH ${OUT}/.stamp)
