/* The residual block and the two ResNets of resnet.h. */
#include "tutorials/13_resnet/resnet.h"

#include <stdio.h>

static tg_module *conv3x3(int64_t in, int64_t out, int stride) {
    return tg_nn_conv2d(in, out, 3, (tg_conv_opts){.stride = stride, .padding = 1, .no_bias = true});
}

static tg_module *batch_norm(int64_t channels) { return tg_nn_batch_norm2d(channels, (tg_batch_norm_opts){0}); }

/* ---- BasicBlock: relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)) ----
 * Each relu(bn(..) (+ shortcut)) is one tg_nn_batch_norm_add_relu: the values of the
 * three ops PyTorch's block writes, in one pass over the activation on the CPU. */

static tg_tensor *basic_block_forward(tg_module *self, tg_tensor *x) {
    tg_module *downsample = tg_module_child(self, "downsample"); /* NULL: the identity shortcut */
    tg_tensor *shortcut = downsample ? tg_forward(downsample, x) : x;
    tg_tensor *out = tg_forward(tg_module_child(self, "conv1"), x);
    out = tg_nn_batch_norm_add_relu(tg_module_child(self, "bn1"), out, NULL);
    out = tg_forward(tg_module_child(self, "conv2"), out);
    return tg_nn_batch_norm_add_relu(tg_module_child(self, "bn2"), out, shortcut);
}

static const tg_module_type basic_block_type = {.name = "BasicBlock", .forward = basic_block_forward};

static tg_module *basic_block(int64_t in, int64_t out, int stride) {
    tg_module *block = tg_module_new(&basic_block_type, 0);
    tg_register_module(block, "conv1", conv3x3(in, out, stride));
    tg_register_module(block, "bn1", batch_norm(out));
    tg_register_module(block, "conv2", conv3x3(out, out, 1));
    tg_register_module(block, "bn2", batch_norm(out));
    if (stride != 1 || in != out) /* option B: project x to the block's shape */
        tg_register_module(block, "downsample",
                           TG_NN_SEQUENTIAL(tg_nn_conv2d(in, out, 1, (tg_conv_opts){.stride = stride, .no_bias = true}),
                                            batch_norm(out)));
    return block;
}

/* torchvision's _make_layer: the first block may stride and widen, the others keep the shape. */
static tg_module *stage(int64_t in, int64_t out, int blocks, int stride) {
    tg_module *layer = tg_nn_sequential(0, NULL);
    for (int i = 0; i < blocks; i++) tg_nn_sequential_append(layer, basic_block(i ? out : in, out, i ? 1 : stride));
    return layer;
}

/* ---- the network: stem, stages, global average pool, classifier ---- */

static tg_tensor *resnet_forward(tg_module *self, tg_tensor *x) {
    x = tg_nn_batch_norm_add_relu(tg_module_child(self, "bn1"), tg_forward(tg_module_child(self, "conv1"), x), NULL);
    for (int i = 1; i <= 4; i++) {
        char name[8];
        snprintf(name, sizeof name, "layer%d", i);
        tg_module *layer = tg_module_child(self, name);
        if (layer) x = tg_forward(layer, x);
    }
    x = tg_flatten(tg_forward(tg_module_child(self, "avgpool"), x), 1, -1); /* [B, C, 1, 1] -> [B, C] */
    return tg_forward(tg_module_child(self, "fc"), x);
}

static const tg_module_type resnet_type = {.name = "ResNet", .forward = resnet_forward};

static tg_module *resnet(int in_channels, int num_classes, int stages, const int64_t *widths, const int *blocks) {
    tg_module *net = tg_module_new(&resnet_type, 0);
    tg_register_module(net, "conv1", conv3x3(in_channels, widths[0], 1));
    tg_register_module(net, "bn1", batch_norm(widths[0]));
    for (int i = 0; i < stages; i++) {
        char name[8];
        snprintf(name, sizeof name, "layer%d", i + 1);
        tg_register_module(net, name, stage(i ? widths[i - 1] : widths[0], widths[i], blocks[i], i ? 2 : 1));
    }
    tg_register_module(net, "avgpool", tg_nn_adaptive_avg_pool2d(1, 1));
    tg_register_module(net, "fc", tg_nn_linear(widths[stages - 1], num_classes, (tg_linear_opts){0}));
    return net;
}

tg_module *resnet20(int in_channels, int num_classes) {
    return resnet(in_channels, num_classes, 3, (const int64_t[]){16, 32, 64}, (const int[]){3, 3, 3});
}

tg_module *resnet18_cifar(int in_channels, int num_classes) {
    return resnet(in_channels, num_classes, 4, (const int64_t[]){64, 128, 256, 512}, (const int[]){2, 2, 2, 2});
}
