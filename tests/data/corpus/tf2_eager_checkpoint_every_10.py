# Source: https://www.tensorflow.org/guide/checkpoint  ("Train and checkpoint the model" section;
#   notebook source github.com/tensorflow/docs/blob/master/site/en/guide/checkpoint.ipynb)
# Adapted minimally: toy_dataset / Net / train_step / train_and_checkpoint exactly as in the guide
# (eager train_step, manager.save() every 10 steps, max_to_keep=3); the guide's 50-step loop is
# lengthened to N_STEPS steps so the run lasts ~20 s; checkpoint dir cleared at start so it trains
# from scratch. Optional TRUTH=1 times the save calls; NOSAVE=1 removes them.
import os, shutil, time
import tensorflow as tf

TRUTH = os.environ.get("TRUTH") == "1"
NOSAVE = os.environ.get("NOSAVE") == "1"
N_STEPS = int(os.environ.get("N_STEPS", "1500"))
shutil.rmtree('./tf_ckpts', ignore_errors=True)

class Net(tf.keras.Model):
  """A simple linear model."""

  def __init__(self):
    super(Net, self).__init__()
    self.l1 = tf.keras.layers.Dense(5)

  def call(self, x):
    return self.l1(x)

net = Net()

def toy_dataset():
  inputs = tf.range(10.)[:, None]
  labels = inputs * 5. + tf.range(5.)[None, :]
  return tf.data.Dataset.from_tensor_slices(
    dict(x=inputs, y=labels)).repeat().batch(2)

def train_step(net, example, optimizer):
  """Trains `net` on `example` using `optimizer`."""
  with tf.GradientTape() as tape:
    output = net(example['x'])
    loss = tf.reduce_mean(tf.abs(output - example['y']))
  variables = net.trainable_variables
  gradients = tape.gradient(loss, variables)
  optimizer.apply_gradients(zip(gradients, variables))
  return loss

opt = tf.keras.optimizers.Adam(0.1)
dataset = toy_dataset()
iterator = iter(dataset)
ckpt = tf.train.Checkpoint(step=tf.Variable(1), optimizer=opt, net=net, iterator=iterator)
manager = tf.train.CheckpointManager(ckpt, './tf_ckpts', max_to_keep=3)

T = {"save": 0.0, "n_save": 0}

def train_and_checkpoint(net, manager):
  ckpt.restore(manager.latest_checkpoint)
  if manager.latest_checkpoint:
    print("Restored from {}".format(manager.latest_checkpoint))
  else:
    print("Initializing from scratch.")

  for _ in range(N_STEPS):
    example = next(iterator)
    loss = train_step(net, example, opt)
    ckpt.step.assign_add(1)
    if int(ckpt.step) % 10 == 0 and not NOSAVE:
      t0 = time.perf_counter()
      save_path = manager.save()
      T["save"] += time.perf_counter() - t0; T["n_save"] += 1
      print("Saved checkpoint for step {}: {}".format(int(ckpt.step), save_path))
      print("loss {:1.2f}".format(loss.numpy()))

t0 = time.perf_counter()
train_and_checkpoint(net, manager)
tot = time.perf_counter() - t0
if TRUTH:
  print("TRUTH loop %.2fs  manager.save %.2fs (%.0f%%, %d saves, %.1f ms each)" % (
      tot, T["save"], 100*T["save"]/tot, T["n_save"], 1000*T["save"]/max(1, T["n_save"])))
