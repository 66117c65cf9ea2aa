"""Write a copy of a llama-architecture GGUF model that keeps only its first N transformer blocks.

For tests/hardware/run_engine_portability.sh: SmolLM2-135M-Instruct.Q4_1.gguf (98 MB) does not fit
the device tool's 64 MiB transfer; 4 of its 30 blocks do (about 39 MB). Every kept tensor is
copied byte for byte, so the same Q4_1 and Q8_0 kernels run; the answers are nonsense, which is
fine: what is checked is that the engine runs, not what it says.

    python truncate_gguf.py IN.gguf OUT.gguf BLOCKS    (needs gguf-py: PYTHONPATH=<llama.cpp>/gguf-py)
"""

from __future__ import annotations

import re
import sys

import gguf


def truncate(source: str, target: str, blocks: int) -> None:
    reader = gguf.GGUFReader(source)
    arch = reader.fields[gguf.Keys.General.ARCHITECTURE].contents()
    writer = gguf.GGUFWriter(target, arch)
    block_count_key = gguf.Keys.LLM.BLOCK_COUNT.format(arch=arch)
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue  # written by GGUFWriter itself
        value_type = field.types[0]
        sub_type = field.types[-1] if value_type == gguf.GGUFValueType.ARRAY else None
        value = blocks if field.name == block_count_key else field.contents()
        writer.add_key_value(field.name, value, value_type, sub_type=sub_type)
    kept = [t for t in reader.tensors
            if not (m := re.match(r"blk\.(\d+)\.", t.name)) or int(m.group(1)) < blocks]
    for tensor in kept:
        writer.add_tensor_info(tensor.name, tensor.data.shape, tensor.data.dtype, tensor.data.nbytes,
                               tensor.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for tensor in kept:
        writer.write_tensor_data(tensor.data, tensor_endianess=reader.endianess)
    writer.close()


if __name__ == "__main__":
    truncate(sys.argv[1], sys.argv[2], int(sys.argv[3]))
