// A minimal PNG decoder (8-bit greyscale, RGB or RGBA, not interlaced: what Chromium's
// screenshots are), so tests can look at pixels without another npm package.
import { inflateSync } from 'node:zlib';

const CHANNELS = { 0: 1, 2: 3, 4: 2, 6: 4 };

export function decodePng(buffer) {
  const signature = '89504e470d0a1a0a';
  if (buffer.subarray(0, 8).toString('hex') !== signature) {
    throw new Error('not a PNG');
  }
  let offset = 8;
  let header = null;
  const data = [];
  while (offset < buffer.length) {
    const length = buffer.readUInt32BE(offset);
    const type = buffer.toString('latin1', offset + 4, offset + 8);
    const chunk = buffer.subarray(offset + 8, offset + 8 + length);
    if (type === 'IHDR') {
      header = {
        width: chunk.readUInt32BE(0),
        height: chunk.readUInt32BE(4),
        bitDepth: chunk[8],
        colorType: chunk[9],
        interlace: chunk[12],
      };
    } else if (type === 'IDAT') {
      data.push(chunk);
    } else if (type === 'IEND') {
      break;
    }
    offset += 12 + length;
  }
  if (!header || header.bitDepth !== 8 || header.interlace !== 0 || !CHANNELS[header.colorType]) {
    throw new Error(`unsupported PNG ${JSON.stringify(header)}`);
  }
  const channels = CHANNELS[header.colorType];
  const stride = header.width * channels;
  const raw = inflateSync(Buffer.concat(data));
  const pixels = Buffer.alloc(stride * header.height);
  for (let y = 0; y < header.height; y += 1) {
    const filter = raw[y * (stride + 1)];
    const line = raw.subarray(y * (stride + 1) + 1, (y + 1) * (stride + 1));
    const out = pixels.subarray(y * stride, (y + 1) * stride);
    const previous = y > 0 ? pixels.subarray((y - 1) * stride, y * stride) : Buffer.alloc(stride);
    for (let x = 0; x < stride; x += 1) {
      const left = x >= channels ? out[x - channels] : 0;
      const up = previous[x];
      const upLeft = x >= channels ? previous[x - channels] : 0;
      let value = line[x];
      if (filter === 1) value += left;
      else if (filter === 2) value += up;
      else if (filter === 3) value += (left + up) >> 1;
      else if (filter === 4) {
        const estimate = left + up - upLeft;
        const dl = Math.abs(estimate - left);
        const du = Math.abs(estimate - up);
        const dul = Math.abs(estimate - upLeft);
        value += dl <= du && dl <= dul ? left : du <= dul ? up : upLeft;
      }
      out[x] = value & 0xff;
    }
  }
  return { width: header.width, height: header.height, channels, pixels };
}

// How varied a region of the image is: the number of distinct coarse colours and the standard
// deviation of brightness. A blank or single-colour frame scores near zero on both.
export function variety(image, region = { x: 0, y: 0, width: image.width, height: image.height }) {
  const colours = new Set();
  let sum = 0;
  let sumSquares = 0;
  let count = 0;
  for (let y = region.y; y < region.y + region.height; y += 2) {
    for (let x = region.x; x < region.x + region.width; x += 2) {
      const index = (y * image.width + x) * image.channels;
      const r = image.pixels[index];
      const g = image.channels >= 3 ? image.pixels[index + 1] : r;
      const b = image.channels >= 3 ? image.pixels[index + 2] : r;
      colours.add(((r >> 4) << 8) | ((g >> 4) << 4) | (b >> 4));
      const brightness = (r + g + b) / 3;
      sum += brightness;
      sumSquares += brightness * brightness;
      count += 1;
    }
  }
  const mean = sum / count;
  return { colours: colours.size, deviation: Math.sqrt(Math.max(0, sumSquares / count - mean * mean)) };
}

// Pixel statistics of a region: the mean colour and the fraction of near-black pixels (every
// channel below 24 of 255), the two things a viewer drawing black where the picture belongs
// changes.
export function colourStats(image, region = { x: 0, y: 0, width: image.width, height: image.height }) {
  let r = 0;
  let g = 0;
  let b = 0;
  let black = 0;
  let count = 0;
  for (let y = region.y; y < region.y + region.height; y += 1) {
    for (let x = region.x; x < region.x + region.width; x += 1) {
      const index = (y * image.width + x) * image.channels;
      const red = image.pixels[index];
      const green = image.channels >= 3 ? image.pixels[index + 1] : red;
      const blue = image.channels >= 3 ? image.pixels[index + 2] : red;
      r += red;
      g += green;
      b += blue;
      if (Math.max(red, green, blue) < 24) black += 1;
      count += 1;
    }
  }
  return { mean: [r / count, g / count, b / count], black: black / count, pixels: count };
}

// How many pixels of a region are close to `colour` ([r, g, b]), each channel within `slack`.
export function pixelsNear(image, region, colour, slack = 40) {
  let near = 0;
  for (let y = region.y; y < region.y + region.height; y += 1) {
    for (let x = region.x; x < region.x + region.width; x += 1) {
      const index = (y * image.width + x) * image.channels;
      if (colour.every((value, channel) => Math.abs(image.pixels[index + channel] - value) <= slack)) {
        near += 1;
      }
    }
  }
  return near;
}

// The middle `fraction` (0..1) of a box, in whole pixels.
export function middle(box, fraction) {
  const width = Math.floor(box.width * fraction);
  const height = Math.floor(box.height * fraction);
  return {
    x: Math.floor(box.x + (box.width - width) / 2),
    y: Math.floor(box.y + (box.height - height) / 2),
    width,
    height,
  };
}
