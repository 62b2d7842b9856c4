"""Synthetic stand-in for THUDM/chatglm2-6b's configuration_chatglm.py (tracker demo).

The corpus does not hold THUDM's remote code; this file exists so that the demo has an
`auto_map` module whose source changes between revisions. It is not THUDM's code.
"""

from transformers import PretrainedConfig


class ChatGLMConfig(PretrainedConfig):
    model_type = "chatglm"

    def __init__(
        self,
        num_layers=28,
        padded_vocab_size=65024,
        hidden_size=4096,
        ffn_hidden_size=13696,
        kv_channels=128,
        num_attention_heads=32,
        seq_length=32768,
        multi_query_attention=True,
        multi_query_group_num=2,
        layernorm_epsilon=1e-5,
        **kwargs,
    ):
        self.num_layers = num_layers
        self.vocab_size = padded_vocab_size
        self.padded_vocab_size = padded_vocab_size
        self.hidden_size = hidden_size
        self.ffn_hidden_size = ffn_hidden_size
        self.kv_channels = kv_channels
        self.num_attention_heads = num_attention_heads
        self.seq_length = seq_length
        self.multi_query_attention = multi_query_attention
        self.multi_query_group_num = multi_query_group_num
        self.layernorm_epsilon = layernorm_epsilon
        super().__init__(**kwargs)
