"""nmt: translate Chinese to English with a model trained by nmt.

    import nmt
    translator = nmt.Translator("checkpoints/real", compute_type="int8", threads=2)
    for result in translator.translate_batch(["文件不存在"], beam_size=4):
        print(result.hypotheses[0])

The runtime is nmt's own C++ library (no PyTorch); calls release the GIL, so
Python threads may share one Translator. Bad input raises ValueError with a
one-line message naming what is wrong.
"""

from ._nmt import TranslationResult, TranslationStats, Translator, __version__

__all__ = ["Translator", "TranslationResult", "TranslationStats", "__version__"]
