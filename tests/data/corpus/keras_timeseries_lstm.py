# In the style of Keras's "Timeseries forecasting for weather prediction" example:
# windows made by keras.utils.timeseries_dataset_from_array, an LSTM trained with fit.
import numpy as np
import keras
from keras import layers

rng = np.random.default_rng(0)
T, F = 20000, 7
t = np.arange(T, dtype="float32")
features = np.stack([np.sin(t / (20 + 5 * i)) + 0.1 * rng.normal(size=T) for i in range(F)], axis=1).astype("float32")
mean, std = features[:15000].mean(axis=0), features[:15000].std(axis=0)
features = (features - mean) / std
past, future, step = 120, 12, 6
seq = past // step
x_train = features[:15000]
y_train = features[past + future : 15000 + past + future, 1]
x_val = features[15000 : T - past - future]
y_val = features[15000 + past + future :, 1]

dataset_train = keras.utils.timeseries_dataset_from_array(
    x_train, y_train, sequence_length=seq, sampling_rate=step, batch_size=256
)
dataset_val = keras.utils.timeseries_dataset_from_array(
    x_val, y_val, sequence_length=seq, sampling_rate=step, batch_size=256
)
inputs = keras.Input(shape=(seq, F))
lstm_out = layers.LSTM(32)(inputs)
outputs = layers.Dense(1)(lstm_out)
model = keras.Model(inputs=inputs, outputs=outputs)
model.compile(optimizer=keras.optimizers.Adam(learning_rate=0.001), loss="mse")
es = keras.callbacks.EarlyStopping(monitor="val_loss", min_delta=0, patience=5)
history = model.fit(dataset_train, epochs=6, validation_data=dataset_val, callbacks=[es], verbose=2)
