"""Keras: model.predict called on one batch in a loop (keras-team/keras#13118,
tensorflow/tensorflow#33009, #44711): the reporters' model, 10 inputs, Dense(32), Dense(2),
predicting a (1, 10) batch. Adapted: 60 calls instead of an endless loop.

Truth, measured without the profiler (``python tests/data/memory/truth.py
tests/data/memory/keras_predict_in_loop.py``; Keras 3.15, TF 2.21 CPU, load average ~8):
30,372 bytes a call (506.4 -> 513.7 MB over 60), ~1 s a call under that load. With the fix
the issues give (``--fix 'result = model.predict(batch, verbose=0)' 'result = model(batch,
training=False)'``): 1,920 bytes a call. On these versions the growth is far smaller than the
reports' (which ran out of memory in minutes on TF 2.0-2.3), and 60 calls add 1.8 MB: under the
finding's threshold (10 MB or 5% of the process), so a run this short gets no growth finding;
the time per call is the larger cost here.
"""

import numpy as np
from tensorflow.keras import Input, Model
from tensorflow.keras.layers import Dense

inp = Input(shape=(10,))
h = Dense(32)(inp)
out = Dense(2)(h)
model = Model(inp, out)

batch = np.ones((1, 10), dtype="float32")
for i in range(60):  # step
    result = model.predict(batch, verbose=0)
print(result)
